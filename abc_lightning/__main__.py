"""``python -m abc_lightning``: the LightningCLI, or ``reproduce`` / ``sweep``."""

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "reproduce":
        from abc_lightning.reproduce import main as reproduce

        return reproduce(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        from abc_lightning.sweep import main as sweep

        return sweep(sys.argv[2:])
    from abc_lightning.cli import run_cli

    return run_cli()


if __name__ == "__main__":
    sys.exit(main())
