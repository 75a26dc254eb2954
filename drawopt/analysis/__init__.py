"""Facts about a stream that passes, tools and reports share, each computed by one owner.

- :mod:`~drawopt.analysis.state`: state transitions, the state in force at every draw;
- :mod:`~drawopt.analysis.access`: which resources every command reads and writes;
- :mod:`~drawopt.analysis.flushrules`: the flush model (what needs a flush, what covers it);
- :mod:`~drawopt.analysis.graph`: the dependency graph (hazards, and the networkx view);
- :mod:`~drawopt.analysis.mergeclass`: merge rules, call classes, dependency segments;
- :mod:`~drawopt.analysis.lowerbound`: the lower bound on draw calls;
- :mod:`~drawopt.analysis.gsmodel`: the geometry-shader on-chip model;
- :mod:`~drawopt.analysis.costmodel`: targets and their CPU cost model.

This layer imports only :mod:`drawopt.ir` and :mod:`drawopt.errors`; the verifier
(:mod:`drawopt.verify`) never imports it (docs/architecture.md, "Layers").
"""
