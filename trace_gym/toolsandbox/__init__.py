"""Apple's ToolSandbox as trace-gym environments: our own engine and scorer, checked against upstream's corpus."""
