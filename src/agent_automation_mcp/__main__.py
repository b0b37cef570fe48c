"""`python -m agent_automation_mcp`, and the `agent-automation-mcp` command."""

import gc
import sys


def main() -> int:
    # A start makes hundreds of thousands of objects (the SDK's modules and ours, the models, the tools) that live as
    # long as the process: collecting garbage among them as they come, and again at exit, finds none (what it cost:
    # docs/benchmarks.md, "The stdio wire and the collector"). The command turns the collector back on once it serves
    # (`cli.serving`), with what the start made kept out of its reach.
    gc.disable()
    from .cli import main as command

    return command()


if __name__ == "__main__":
    sys.exit(main())
