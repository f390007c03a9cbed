"""python -m faultproxy --upstream 127.0.0.1:8333 --listen 127.0.0.1:0 --rule ... --seed 1

Prints ``PORT=<n>`` (and ``URL=http://...``) on stdout once listening, then runs
until SIGINT or SIGTERM. SIGUSR1 prints the counters as JSON on stderr; they are
printed once more on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import urllib.parse

from .proxy import FaultProxy
from .rules import FAULTS, KINDS, Rule


def _hostport(text: str, default_port: int | None = None) -> tuple[str, int, bool]:
    """host:port or http(s)://host:port -> (host, port, tls)."""
    tls = False
    if "://" in text:
        u = urllib.parse.urlsplit(text)
        if u.scheme not in ("http", "https"):
            raise argparse.ArgumentTypeError(f"unsupported scheme in {text!r}")
        tls = u.scheme == "https"
        host, port = u.hostname, u.port or (443 if tls else 80)
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            if default_port is None:
                raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
            host, port = text, default_port
        host = host.strip("[]")
    try:
        return host, int(port), tls
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None


def _rule(text: str) -> Rule:
    try:
        return Rule.parse(text)
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m faultproxy",
        description="Fault-injecting HTTP/1.1 reverse proxy for S3 tests.",
        epilog=(
            "rule: FAULT[:key=value,...]  faults: " + ", ".join(FAULTS)
            + "  kinds: " + ", ".join(KINDS)
            + "  e.g. delay_first_byte:p=0.01,kind=upload_part,delay=2-5"
        ),
    )
    ap.add_argument("--upstream", required=True, help="HOST:PORT or http(s)://HOST:PORT of the S3 server")
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: ephemeral)")
    ap.add_argument("--rule", action="append", type=_rule, default=[], help="a fault rule (repeatable)")
    ap.add_argument("--seed", default="0", help="seed of the fault RNG (default 0)")
    ap.add_argument("--decisions", choices=("sequence", "keyed"), default="sequence")
    ap.add_argument("--virtual-hosted", action="store_true", help="paths are /key, not /bucket/key")
    ap.add_argument("--cafile", help="with an https upstream: CA bundle to verify it (default: system CAs)")
    ap.add_argument("--insecure", action="store_true", help="with an https upstream: do not verify its certificate")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="-v: log each request with its faults; -vv: asyncio too")
    args = ap.parse_args(argv)

    logging.basicConfig(
        level=logging.DEBUG if args.verbose > 1 else logging.WARNING,
        format="%(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.verbose:
        logging.getLogger("faultproxy").setLevel(logging.DEBUG)
    uhost, uport, tls = _hostport(args.upstream)
    lhost, lport, _ = _hostport(args.listen, default_port=0)
    ssl_ctx = None
    if tls:
        import ssl

        ssl_ctx = ssl.create_default_context(cafile=args.cafile)
        if args.insecure:
            ssl_ctx.check_hostname = False
            ssl_ctx.verify_mode = ssl.CERT_NONE
    seed: int | str = int(args.seed) if args.seed.lstrip("-").isdigit() else args.seed
    proxy = FaultProxy(
        uhost, uport, rules=args.rule, seed=seed,
        listen_host=lhost, listen_port=lport,
        decisions=args.decisions, virtual_hosted=args.virtual_hosted, upstream_ssl=ssl_ctx,
    )

    def dump():
        print(json.dumps(proxy.stats(), sort_keys=True), file=sys.stderr, flush=True)

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if hasattr(signal, "SIGUSR1"):
            loop.add_signal_handler(signal.SIGUSR1, dump)
        await proxy.start_async()
        print(f"PORT={proxy.port}", flush=True)
        print(f"URL={proxy.url}", flush=True)
        for r in proxy.rules():
            logging.getLogger("faultproxy").info("rule %s", r)
        await stop.wait()
        await proxy.stop_async()

    asyncio.run(run())
    dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())
