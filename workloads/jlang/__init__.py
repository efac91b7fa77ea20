"""j-lang workloads: the language, its model and oracle, the ACE-style suites."""
