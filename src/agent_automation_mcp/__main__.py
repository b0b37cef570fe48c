"""`python -m agent_automation_mcp`, and the `agent-automation-mcp` command."""

import gc
import sys


def main() -> int:
    # A start makes hundreds of thousands of objects (the SDK's modules and ours, the models, the tools) that live as
    # long as the process: collecting garbage among them as they come finds none and took a fifth of a stdio start.
    # The command turns the collector back on once it serves (`cli.serving`), with what it made kept out of it.
    gc.disable()
    from .cli import main as command

    return command()


if __name__ == "__main__":
    sys.exit(main())
