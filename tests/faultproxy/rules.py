"""Fault rules: what to inject, how often, on which kind of S3 request.

A rule is ``FAULT[:key=value[,key=value...]]`` as text (the CLI's ``--rule``), or
``Rule(FAULT, p=..., kind=..., **params)`` from Python, or a dict with the same
keys. See README.md for the full table.
"""

from __future__ import annotations

import dataclasses
import random
import re
import urllib.parse
from typing import Any, Iterable

# Request kinds. A request has one primary kind (counted in stats) and belongs to
# every broader kind too: an UploadPart is also a "put", a ranged GET also a "get",
# and everything is "any".
KINDS = (
    "upload_part",       # PUT ?partNumber=&uploadId=
    "put",               # any PUT (PutObject, UploadPart, CopyObject, ...)
    "ranged_get",        # GET of an object with a Range header
    "get",               # GET of an object (ranged or not)
    "complete",          # POST ?uploadId= (CompleteMultipartUpload)
    "create_multipart",  # POST ?uploads
    "abort",             # DELETE ?uploadId=
    "head",              # HEAD
    "delete",            # DELETE (object or bucket) and POST ?delete
    "list",              # GET of the service or a bucket, ListParts
    "other",
    "any",
)

# Fault name -> family. Only one fault of a family applies to one request (the
# first rule of that family that fires); families combine otherwise.
FAULTS = {
    "delay_first_byte": "delay",
    "slowdown_503": "error",
    "internal_error_500": "error",
    "error": "error",
    "storm": "error",
    "reset_request": "reset_request",
    "corrupt_request": "corrupt",
    "reset_response": "reset_response",
    "truncate_response": "truncate",
    "bandwidth": "bandwidth",
}

# When several families fire, the terminal ones exclude each other in this order.
TERMINAL_PRECEDENCE = ("error", "reset_request", "reset_response", "truncate")

_ERROR_DEFAULTS = {
    "slowdown_503": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal_error_500": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
    "error": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "storm": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}

_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)(i?[bB])?\s*$")
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(value: Any) -> int:
    """Bytes from an int or a string such as ``65536``, ``64K``, ``64KiB``, ``1.5M``.

    Suffixes K, M, G are binary (1024-based) whether or not written KiB or KB.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"size must be >= 0, got {value!r}")
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (use e.g. 65536, 64K, 1MiB)")
    return int(float(m.group(1)) * _SIZE_MULT[m.group(2).lower()])


def _parse_range(value: Any, conv) -> tuple:
    """(lo, hi) from a number, a (lo, hi) pair, or a string ``lo-hi``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"range needs two values, got {value!r}")
        lo, hi = conv(value[0]), conv(value[1])
    elif isinstance(value, str) and "-" in value.strip().lstrip("-"):
        a, b = value.split("-", 1)
        lo, hi = conv(a), conv(b)
    else:
        lo = hi = conv(value)
    if lo < 0 or hi < lo:
        raise ValueError(f"bad range {value!r}: need 0 <= lo <= hi")
    return (lo, hi)


def _seconds(value: Any) -> float:
    v = float(str(value).strip().rstrip("s")) if isinstance(value, str) else float(value)
    if v < 0:
        raise ValueError(f"seconds must be >= 0, got {value!r}")
    return v


def _kinds(value: Any) -> frozenset | None:
    if value is None:
        return None
    if isinstance(value, str):
        parts = [k for k in re.split(r"[|+ ]", value) if k]
    else:
        parts = list(value)
    out = set()
    for k in parts:
        if k not in KINDS:
            raise ValueError(f"unknown request kind {k!r}; known: {', '.join(KINDS)}")
        out.add(k)
    if not out or "any" in out:
        return None
    return frozenset(out)


@dataclasses.dataclass
class Rule:
    """One fault with its probability and request-kind filter.

    Parameters by fault (all optional):
      delay_first_byte   delay=SECONDS or (lo, hi) / "lo-hi" (uniform), default 1
      slowdown_503, internal_error_500, error, storm
                         status, code, message (error and storm default to 503 SlowDown);
                         body="auto"|"drain"|"close" (pending request body, README);
                         retry_after=TEXT adds a Retry-After header (seconds or an HTTP-date)
      storm              start=SECONDS, duration=SECONDS: answers every matching request
                         (with p) whose arrival is inside [start, start+duration) counted
                         from the first matching request after the rule was set
      reset_request      after=BYTES or range: RST after this many request-body bytes
      corrupt_request    after=BYTES or range: flip one bit of the request-body byte at this
                         offset (default 0) and forward the rest untouched
      reset_response     after=BYTES or range: RST after this many response-body bytes
      truncate_response  after=BYTES or range (default: half the body), then FIN
      bandwidth          rate=BYTES/s (required), direction="response"|"request"|"both",
                         burst=BYTES (bucket size, default rate/20 within 4 KiB..256 KiB)
    Common: p (probability, default 1.0), kind (filter, default any),
            times (fire at most this many times, default unlimited).
    """

    fault: str
    p: float = 1.0
    kind: Any = None
    times: int | None = None
    delay: Any = None
    after: Any = None
    rate: Any = None
    direction: str = "response"
    burst: Any = None
    status: int | None = None
    code: str | None = None
    message: str | None = None
    body: str = "auto"
    retry_after: Any = None
    start: Any = None
    duration: Any = None
    # storm: monotonic time of the first matching request (the storm's clock)
    t0: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; known: {', '.join(FAULTS)}")
        self.p = float(self.p)
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p must be within 0..1, got {self.p}")
        self.kind = _kinds(self.kind)
        if self.times is not None:
            self.times = int(self.times)
            if self.times < 0:
                raise ValueError("times must be >= 0")
        f = self.fault
        if f == "delay_first_byte":
            self.delay = _parse_range(1.0 if self.delay is None else self.delay, _seconds)
        elif self.delay is not None:
            raise ValueError(f"{f}: 'delay' only applies to delay_first_byte")
        if f in ("reset_request", "reset_response", "truncate_response", "corrupt_request"):
            if self.after is not None:
                self.after = _parse_range(self.after, parse_size)
            elif f != "truncate_response":
                self.after = (0, 0)
        elif self.after is not None:
            raise ValueError(f"{f}: 'after' does not apply")
        if f == "bandwidth":
            if self.rate is None:
                raise ValueError("bandwidth needs rate=BYTES_PER_SECOND")
            self.rate = parse_size(self.rate)
            if self.rate <= 0:
                raise ValueError("bandwidth rate must be > 0")
            if self.direction not in ("response", "request", "both"):
                raise ValueError("direction must be response, request or both")
            self.burst = (
                max(4096, min(256 * 1024, self.rate // 20))
                if self.burst is None
                else max(1, parse_size(self.burst))
            )
        elif self.rate is not None:
            raise ValueError(f"{f}: 'rate' only applies to bandwidth")
        if FAULTS[f] == "error":
            dstatus, dreason, dcode, dmsg = _ERROR_DEFAULTS[f]
            self.status = dstatus if self.status is None else int(self.status)
            # 200 too: S3 can fail CompleteMultipartUpload inside a 200 response.
            if not (400 <= self.status <= 599 or self.status == 200):
                raise ValueError("error status must be 4xx, 5xx or 200 (an error body in a 200 response)")
            if self.code is None:
                self.code = dcode if self.status == dstatus else "InternalError"
            if self.message is None:
                self.message = dmsg if self.status == dstatus else "Injected fault."
            if self.body not in ("auto", "drain", "close"):
                raise ValueError("body must be auto, drain or close")
            if self.retry_after is not None:
                self.retry_after = str(self.retry_after)
                if not self.retry_after or any(c in self.retry_after for c in "\r\n"):
                    raise ValueError("retry_after must be a one-line header value")
        elif self.retry_after is not None:
            raise ValueError(f"{f}: 'retry_after' only applies to error faults")
        if f == "storm":
            self.start = _seconds(0.0 if self.start is None else self.start)
            if self.duration is None:
                raise ValueError("storm needs duration=SECONDS")
            self.duration = _seconds(self.duration)
        elif self.start is not None or self.duration is not None:
            raise ValueError(f"{f}: 'start' and 'duration' only apply to storm")

    @property
    def family(self) -> str:
        return FAULTS[self.fault]

    @property
    def reason(self) -> str:
        dstatus, dreason, _, _ = _ERROR_DEFAULTS.get(self.fault, (0, "", "", ""))
        if self.status == dstatus:
            return dreason
        return _REASONS.get(self.status or 0, "Error")

    def in_window(self, now: float) -> bool:
        """storm: whether a request arriving at monotonic time now is inside the
        storm (the first call starts the storm's clock). Other faults: True."""
        if self.fault != "storm":
            return True
        if self.t0 is None:
            self.t0 = now
        return self.start <= now - self.t0 < self.start + self.duration

    def matches(self, kinds: frozenset) -> bool:
        return self.kind is None or not self.kind.isdisjoint(kinds)

    def draw(self, rng: random.Random) -> dict:
        """The concrete parameters of one firing (draws from rng only for ranges)."""
        f = self.fault
        if f == "delay_first_byte":
            lo, hi = self.delay
            return {"delay": lo if lo == hi else rng.uniform(lo, hi)}
        if f in ("reset_request", "reset_response", "truncate_response", "corrupt_request"):
            if self.after is None:
                return {"after": None}
            lo, hi = self.after
            return {"after": lo if lo == hi else rng.randint(lo, hi)}
        if f == "bandwidth":
            return {"rate": self.rate, "burst": self.burst, "direction": self.direction}
        return {
            "status": self.status,
            "reason": self.reason,
            "code": self.code,
            "message": self.message,
            "body": self.body,
            "retry_after": self.retry_after,
        }

    def __str__(self) -> str:
        parts = [f"p={self.p:g}"]
        if self.kind:
            parts.append("kind=" + "|".join(sorted(self.kind)))
        if self.times is not None:
            parts.append(f"times={self.times}")
        if self.fault == "delay_first_byte":
            lo, hi = self.delay
            parts.append(f"delay={lo:g}" if lo == hi else f"delay={lo:g}-{hi:g}")
        if self.after is not None:
            lo, hi = self.after
            parts.append(f"after={lo}" if lo == hi else f"after={lo}-{hi}")
        if self.fault == "bandwidth":
            parts += [f"rate={self.rate}", f"direction={self.direction}", f"burst={self.burst}"]
        if self.family == "error":
            parts += [f"status={self.status}", f"code={self.code}", f"body={self.body}"]
            if self.retry_after is not None:
                parts.append(f"retry_after={self.retry_after}")
        if self.fault == "storm":
            parts += [f"start={self.start:g}", f"duration={self.duration:g}"]
        return f"{self.fault}:" + ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> "Rule":
        """``FAULT[:key=value,...]``, e.g. ``delay_first_byte:p=0.01,kind=upload_part,delay=2-5``."""
        fault, _, rest = text.strip().partition(":")
        kwargs: dict[str, Any] = {}
        for item in filter(None, (s.strip() for s in rest.split(","))):
            key, eq, value = item.partition("=")
            key = key.strip()
            if not eq:
                raise ValueError(f"rule {text!r}: expected key=value, got {item!r}")
            if key in ("message", "retry_after"):
                value = urllib.parse.unquote(value)
            kwargs[key] = value.strip()
        return cls.from_dict({"fault": fault.strip(), **kwargs})

    @classmethod
    def from_dict(cls, d: dict) -> "Rule":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown rule key(s) {sorted(unknown)}; known: {sorted(names)}")
        return cls(**d)


def to_rules(rules: Iterable[Any] | None) -> list[Rule]:
    """Rules from Rule objects, rule strings or dicts."""
    out = []
    for r in rules or ():
        if isinstance(r, Rule):
            out.append(dataclasses.replace(r))
        elif isinstance(r, str):
            out.append(Rule.parse(r))
        elif isinstance(r, dict):
            out.append(Rule.from_dict(r))
        else:
            raise TypeError(f"a rule is a Rule, str or dict, not {type(r).__name__}")
    return out


def classify(method: str, target: str, has_range: bool, virtual_hosted: bool = False):
    """(primary kind, frozenset of all kinds) of one S3 request.

    Path-style addressing (``/bucket/key``) is assumed unless virtual_hosted, where
    the path is ``/key``.
    """
    path, _, query = target.partition("?")
    q = {p.split("=", 1)[0] for p in query.split("&") if p}
    segs = path.lstrip("/")
    has_key = bool(segs) if virtual_hosted else bool(segs.partition("/")[2])
    kinds = {"any"}
    if method == "PUT":
        kinds.add("put")
        primary = "upload_part" if ("partNumber" in q and "uploadId" in q) else "put"
    elif method == "GET":
        if has_key and "uploadId" not in q:
            kinds.add("get")
            primary = "ranged_get" if has_range else "get"
        else:
            primary = "list"
    elif method == "POST":
        if "uploadId" in q:
            primary = "complete"
        elif "uploads" in q:
            primary = "create_multipart"
        elif "delete" in q:
            primary = "delete"
        else:
            primary = "other"
    elif method == "DELETE":
        primary = "abort" if "uploadId" in q else "delete"
    elif method == "HEAD":
        primary = "head"
    else:
        primary = "other"
    kinds.add(primary)
    return primary, frozenset(kinds)
