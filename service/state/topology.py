"""Which site each perfSONAR host belongs to, from an operator's topology mapping."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Topology:
    """Host name or IP (lower-cased) -> site name; empty when no topology file is configured."""

    site_by_host: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, sites: dict[str, list[str]]) -> Topology:
        """Build from `{site: [host name or IP, ...]}`; a host under two sites is an error."""
        site_by_host: dict[str, str] = {}
        for site, hosts in sites.items():
            for host in hosts:
                key = str(host).strip().lower()
                if site_by_host.get(key, site) != site:
                    raise ValueError(
                        f"host {host!r} is listed under {site_by_host[key]!r} and {site!r}"
                    )
                site_by_host[key] = str(site)
        return cls(site_by_host)

    @property
    def sites(self) -> list[str]:
        return sorted(set(self.site_by_host.values()))

    def site_of(self, host: str, ip: str) -> str | None:
        return self.site_by_host.get(host.lower()) or self.site_by_host.get(ip.lower())
