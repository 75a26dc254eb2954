"""drawopt's passes, one module each (installed as ``drawopt.passes``).

The registry is :data:`drawopt.passmanager.PASSES`.
"""
