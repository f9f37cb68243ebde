"""``python -m abc_lightning``: the LightningCLI, or ``reproduce`` / ``sweep``."""

import importlib
import signal
import sys


def guarded(run, argv: list[str], flag: str) -> int:
    """``reproduce`` and ``sweep``: a mistake or a fault is one line and an exit status, as
    for the LightningCLI subcommands (abc_lightning.cli.faults); a stop signal is passed on
    to the runs under way, which save and end, and then ends this with 128 + the signal."""
    from abc_lightning.cli.faults import report
    from abc_lightning.errors import Terminated
    from abc_lightning.reproduce.runner import passing_on_stops

    try:
        with passing_on_stops():
            return run(argv)
    except SystemExit:
        raise
    except Terminated as exc:
        import signal

        print(f"abc_lightning: error: stopped by {signal.Signals(exc.signum).name}; run the same command again "
              "to go on: what has finished is kept and skipped, a run that was under way starts over",
              file=sys.stderr)
        return exc.status
    except BaseException as exc:
        status = report(exc, flag=flag)
        if status is None:
            raise
        return status


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "reproduce":
        from abc_lightning.reproduce import main as reproduce

        return guarded(reproduce, sys.argv[2:], "--results PATH")
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        from abc_lightning.reproduce.sweep import main as sweep

        return guarded(sweep, sys.argv[2:], "--out PATH")
    from abc_lightning.cli import run_cli

    return run_cli()


INTERRUPTED = "abc_lightning: error: interrupted before the first checkpoint; nothing to resume"


def import_then(argv: list[str]) -> bool:
    """Import what ``argv`` runs (torch, Lightning: seconds) with Ctrl+C held back: a
    KeyboardInterrupt inside a library's import can be swallowed by its import probes or
    leave a half-loaded extension behind. True when Ctrl+C came meanwhile."""
    pressed: list[int] = []
    hold = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not where SIGINT is ignored (nohup)
    if hold:
        signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        name = {"reproduce": "reproduce", "sweep": "reproduce.sweep"}.get(argv[1] if len(argv) > 1 else "", "cli")
        importlib.import_module(f"abc_lightning.{name}")
    finally:
        if hold:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(pressed)


def entry() -> int:
    """:func:`main`, with a Ctrl+C while it is still importing or starting answered in one
    line, as one later is."""
    try:
        if import_then(sys.argv):
            print(INTERRUPTED, file=sys.stderr)
            return 130
        return main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(entry())
