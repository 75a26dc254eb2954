"""The IR: opcodes (:mod:`~drawopt.ir.ops`), declarations (:mod:`~drawopt.ir.decls`), the argument
codec (:mod:`~drawopt.ir.codec`), the columnar :class:`~drawopt.ir.stream.Stream` and its three
file formats (:mod:`drawopt.ir.formats`).

The lowest layer above :mod:`drawopt.errors`: it imports nothing else of drawopt
(docs/architecture.md, "Layers"; ``tests/test_layout.py`` checks the order).
"""
