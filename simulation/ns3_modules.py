"""Load into cppyy only the ns-3 modules a scenario's C++ source includes.

The `ns3` wheel's own loader (`from ns import ns`) includes the headers of every ns-3 module (Wi-Fi,
LTE, mesh, ...) and loads every library: about 7.5 CPU-seconds in each process that simulates.
Family C's scenarios include six modules; parsing only their headers takes about 1.8 s. The
libraries they need in turn (stats, bridge) come with them through their runpath.
"""

from __future__ import annotations

import re
from importlib.util import find_spec
from pathlib import Path

#: `#include "ns3/NAME-module.h"` in a C++ source.
MODULE_INCLUDE = re.compile(r'^#include "ns3/([a-z0-9-]+)-module\.h"', re.MULTILINE)

#: What the wheel's loader defines for its libraries, as it builds them (core and stats link
#: GSL and SQLite): the headers' declarations must match the compiled libraries'.
LIBRARY_DEFINES = "#define HAVE_GSL 1\n#define HAVE_SQLITE3 1\n"


def included_modules(source: str) -> list[str]:
    """The ns-3 modules `source` includes, in its order.

    >>> included_modules('#include "ns3/core-module.h"\\n#include <vector>\\n'
    ...                  '#include "ns3/point-to-point-module.h"\\n')
    ['core', 'point-to-point']
    """
    return MODULE_INCLUDE.findall(source)


def ns3_prefix() -> Path:
    """The `ns3` wheel's install folder (its include/ and lib64/)."""
    spec = find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("family C needs ns-3: pip install 'nettel[ns3]'")
    return Path(next(iter(spec.submodule_search_locations)))


def module_library(prefix: Path, module: str) -> Path:
    """The one library of `module` in the wheel (`lib64/libns3.<version>-<module>.so`)."""
    found = sorted(prefix.glob(f"lib*/libns3.*-{module}.so"))
    if len(found) != 1:
        raise RuntimeError(f"expected one ns-3 library for module {module!r}, found {found}")
    return found[0]


def load_ns3_modules(modules: list[str]) -> None:
    """Make `modules`' headers and libraries known to cppyy (once per process is enough)."""
    import cppyy
    import libcppyy

    prefix = ns3_prefix()
    libraries = [module_library(prefix, module) for module in modules]
    libcppyy.AddSmartPtrType("Ptr")  # ns-3's smart pointer, as the wheel's loader registers it
    cppyy.add_include_path(str(prefix / "include"))
    cppyy.cppexec(LIBRARY_DEFINES)
    for module in modules:
        cppyy.include(f"ns3/{module}-module.h")
    for library in libraries:
        cppyy.add_library_path(str(library.parent))
        cppyy.load_library(library.name)
