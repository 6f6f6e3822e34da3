"""Scripts run in the Rucio server's venv against its database, with Rucio's own core API.

`python rucio_side.py setup < SPEC_JSON`: RSEs (each with its site attribute, `nettel_test` =
the spec's group, and a root protocol for third-party copy), distance rows, user accounts
(`users`: names; a userpass identity of that name, password secret) and optionally one file
with replicas at some RSEs and a rule that asks for a copy at another, which queues a transfer.
`python rucio_side.py ranking`: each queued transfer's sources (by destination RSE) in the
order Rucio's conveyor would try them (`build_transfer_paths` over a fresh `Topology`, the
conveyor's default source ranking strategies). Both print JSON.

Nothing in nettel imports this file: `devtools.rucio_server.RucioServer.run_script` runs it
under the server's interpreter. `setup` without a transfer also takes a bulk spec
(`"rses": {...}, "distances": [[source, destination, distance], ...]`) for the benchmark;
`distances` prints every distance row as [source, destination, distance].
"""

import json
import sys


def setup(spec):
    from rucio.db.sqla.session import transactional_session

    print(json.dumps(transactional_session(_setup)(spec)))


def _setup(spec, *, session):
    from rucio.common.types import InternalAccount, InternalScope
    from rucio.core.distance import add_distance
    from rucio.core.replica import add_replica
    from rucio.core.rse import add_protocol, add_rse, add_rse_attribute
    from rucio.core.rule import add_rule
    from rucio.core.scope import add_scope

    root = InternalAccount("root")
    ids = {}
    for rse, site in spec["rses"].items():
        rse_id = add_rse(rse, session=session)
        ids[rse] = rse_id
        add_rse_attribute(rse_id, "site", site, session=session)
        add_rse_attribute(rse_id, "fts", "https://fts.example.org:8446", session=session)
        add_rse_attribute(rse_id, "nettel_test", spec["group"], session=session)
        wan = {
            "read": 1,
            "write": 1,
            "delete": 1,
            "third_party_copy_read": 1,
            "third_party_copy_write": 1,
        }
        add_protocol(
            rse_id,
            {
                "scheme": "root",
                "hostname": f"{rse.lower()}.example.org",
                "port": 1094,
                "prefix": "/rucio/",
                "impl": "rucio.rse.protocols.xrootd.Default",
                "domains": {"lan": {"read": 1, "write": 1, "delete": 1}, "wan": wan},
            },
            session=session,
        )
    for source, destination, distance in spec["distances"]:
        add_distance(ids[source], ids[destination], distance=distance, session=session)
    for account in spec.get("users", []):  # a user account without admin rights, password secret
        _add_user(account, session=session)
    transfer = spec.get("transfer")
    if transfer:
        scope = InternalScope(spec["group"])
        add_scope(scope, root, session=session)
        for rse in transfer["replicas"]:
            add_replica(ids[rse], scope, "file-1", 1024, root, adler32="0cc737eb", session=session)
        add_rule(
            [{"scope": scope, "name": "file-1"}],
            root,
            1,
            transfer["rule"],
            "NONE",
            None,
            None,
            False,
            None,
            ignore_account_limit=True,
            session=session,
        )
    return ids


def _add_user(name, *, session):
    from rucio.common.types import InternalAccount
    from rucio.core.account import add_account
    from rucio.core.identity import add_account_identity, add_identity
    from rucio.db.sqla.constants import AccountType, IdentityType

    account, email = InternalAccount(name), f"{name}@example.org"
    add_account(account, AccountType.USER, email, session=session)
    add_identity(name, IdentityType.USERPASS, email, password="secret", session=session)
    add_account_identity(name, IdentityType.USERPASS, account, email, session=session)


def distances():
    from rucio.core.distance import get_distances
    from rucio.core.rse import get_rse_name
    from rucio.db.sqla.session import read_session

    @read_session
    def rows(*, session):
        names = {}

        def name(rse_id):
            if rse_id not in names:
                names[rse_id] = get_rse_name(rse_id, session=session)
            return names[rse_id]

        return [
            [name(row["src_rse_id"]), name(row["dest_rse_id"]), row["distance"]]
            for row in get_distances(session=session)
        ]

    print(json.dumps(rows()))


def ranking():
    from rucio.core.request import list_and_mark_transfer_requests_and_source_replicas
    from rucio.core.topology import Topology
    from rucio.core.transfer import ProtocolFactory, build_transfer_paths
    from rucio.db.sqla.constants import RequestState, RequestType
    from rucio.db.sqla.session import transactional_session

    @transactional_session
    def ordered(*, session):
        topology = Topology()
        topology.configure_multihop(session=session)
        requests = list_and_mark_transfer_requests_and_source_replicas(
            rse_collection=topology,
            request_type=[RequestType.TRANSFER],
            request_state=RequestState.QUEUED,
            session=session,
        )
        paths = build_transfer_paths(
            topology=topology,
            protocol_factory=ProtocolFactory(),
            requests_with_sources=list(requests.values()),
            session=session,
        )[0]
        return {
            str(requests[request_id].dest_rse.name): [
                [str(path[0].src.rse.name), path[0].src.distance] for path in candidates
            ]
            for request_id, candidates in paths.items()
        }

    print(json.dumps(ordered()))


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(json.load(sys.stdin))
    elif sys.argv[1] == "distances":
        distances()
    else:
        ranking()
