"""faultproxy: a fault-injecting HTTP/1.1 reverse proxy for S3 tests (stdlib only).

    from faultproxy import FaultProxy
    with FaultProxy("127.0.0.1", 8333, rules=["slowdown_503:p=0.1,kind=upload_part"], seed=1) as p:
        ...  # point the client at p.url

See README.md for the rule syntax and the behaviour of each fault.
"""

from .proxy import READ_SIZE, Decision, FaultProxy, TokenBucket
from .rules import FAULTS, KINDS, Rule, classify, parse_size, to_rules

__all__ = [
    "FAULTS",
    "KINDS",
    "READ_SIZE",
    "Decision",
    "FaultProxy",
    "Rule",
    "TokenBucket",
    "classify",
    "parse_size",
    "to_rules",
]
