"""Readers that turn router utilisation data into ``UtilisationSeries`` for training.

One module per format; each has a pure ``parse_*`` on text/bytes and a ``read_*_file`` wrapper,
and returns a list of series (in and out per interface or site, one per site pair for flows).
``to_minutes`` puts any series on the per-minute grid of perfSONAR data.

==========================  =====================================  ==========================
module                      format                                 link key
==========================  =====================================  ==========================
``router_csv``              netTel router-statistics CSV export    the ``Router:`` line
``site_snmp_json``          WLCG site SNMP JSON snapshots          ``Description``
``lhcopn_flows``            ``/topic/netflow.lhcopn`` messages     ``"SRC->DST"``
``snmp_counters``           raw ifHCIn/OutOctets counter CSV       ``interface``
==========================  =====================================  ==========================
"""

from training.readers.errors import RouterDataError
from training.readers.lhcopn_flows import parse_lhcopn_flows, read_lhcopn_flows_file
from training.readers.resample import to_minutes
from training.readers.router_csv import parse_router_csv, read_router_csv_file
from training.readers.series import Direction, UtilisationSeries, build_series
from training.readers.site_snmp_json import parse_site_snmp_json, read_site_snmp_json_file
from training.readers.snmp_counters import parse_snmp_counters, read_snmp_counters_file

__all__ = [
    "Direction",
    "RouterDataError",
    "UtilisationSeries",
    "build_series",
    "parse_lhcopn_flows",
    "parse_router_csv",
    "parse_site_snmp_json",
    "parse_snmp_counters",
    "read_lhcopn_flows_file",
    "read_router_csv_file",
    "read_site_snmp_json_file",
    "read_snmp_counters_file",
    "to_minutes",
]
