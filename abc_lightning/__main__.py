"""``python -m abc_lightning``: the LightningCLI, or ``reproduce`` / ``sweep``."""

import sys


def guarded(run, argv: list[str], flag: str) -> int:
    """``reproduce`` and ``sweep``: a mistake or a fault is one line and an exit status, as
    for the LightningCLI subcommands (abc_lightning.faults)."""
    from abc_lightning.faults import report

    try:
        return run(argv)
    except SystemExit:
        raise
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
        from abc_lightning.sweep import main as sweep

        return guarded(sweep, sys.argv[2:], "--out PATH")
    from abc_lightning.cli import run_cli

    return run_cli()


def entry() -> int:
    """:func:`main`, with a Ctrl+C while it is still importing (torch, Lightning) answered in
    one line, as one later is."""
    try:
        return main()
    except KeyboardInterrupt:
        print("abc_lightning: error: interrupted before the first checkpoint; nothing to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(entry())
