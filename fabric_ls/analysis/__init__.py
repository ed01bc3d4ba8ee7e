"""The engine: from a script's text to the Fabric calls it makes, each with the guard it happens under.

    source        parse, repair half-typed code, exact positions
    dead_code     statements no finding can depend on, which the evaluator skips
    edit_reuse    an edit of dead statements only: the last result, its positions moved
    project       where imported modules live (jedi_bridge: the only jedi user)
    values        abstract values; trail: the undo log; guards: conditions as BDDs
    run           the evaluator (state, statements, conditions, expressions, calls, library,
                  fabric_calls, value_ops); join: both sides of a branch on one state
    strategies    the strategy registry; resolve_strategy: what ``Fabric(...)`` builds
    events        one Fabric call, handed to the rules
    explore       runs, forks where a value must be one thing, findings with their guards

It never imports pygls: the server and the CLI present what it finds.
"""
