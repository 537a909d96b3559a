"""The scenario many study tests share: an all-to-all and a Flood-Pairs congestor, four nodes
each, placed at random on a 16-host 2:1 slimmed tree, so the two share up-links and sharing costs
the all-to-all time. As a TOML file's text (TOML) and as a table (DATA)."""

import tomllib

TOML = """\
[topology]
kind = "xgft"
m = [4, 4]
w = [1, 2]
[[jobs]]
name = "a2a"
nodes = 4
placement = "random"
workload = { kind = "all-to-all", bytes = 32768, iterations = 2 }
[[jobs]]
name = "flood"
nodes = 4
placement = "random"
workload = { kind = "flood-pairs", iterations = 10 }
"""
DATA = {"seed": 3, **tomllib.loads(TOML)}
