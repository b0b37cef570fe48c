"""The bundle's entry point: the package pyproject.toml pins, started as its console script would be."""

import sys

from agent_automation_mcp.cli import main

sys.exit(main())
