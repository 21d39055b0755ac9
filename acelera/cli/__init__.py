"""The `acelera` command line (typer, with options generated from installed plugins)."""


def main(argv=None) -> int:
    from acelera.cli.app import main as _main

    return _main(argv)
