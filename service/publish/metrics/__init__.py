"""Prometheus exposition: one small collector per concern, each read at scrape time.

The runtime registers each collector with the part whose state it reads (`service.runtime`);
every collector describes its families, so a registry refuses two collectors exporting one name.
"""
