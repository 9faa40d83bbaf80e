"""`cslint port`: a torch-style optimizer rewritten into a cstorch one.

The port is built on the linter: each round lints the code, turns the findings it can
act on into edits at their exact spans (`rewrite`), and applies the linter's own fixes
(`cslint.fixes`), until nothing changes; what is left is reported with its codes.
`verify` runs the original and the port side by side (torch, in a subprocess).
Imported only by `cslint port`: it loads libcst.
"""

from cslint.port.rewrite import PortedClass, PortedFile, PortError, port_file

__all__ = ["PortError", "PortedClass", "PortedFile", "port_file"]
