"""vgrout: gradient routing of reward-hacking rollouts into a deletable quarantine block (see DESIGN and README)."""
