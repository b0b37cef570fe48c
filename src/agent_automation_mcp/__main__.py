"""`python -m agent_automation_mcp` is the `agent-automation-mcp` command."""

import sys

from .cli import main

sys.exit(main())
