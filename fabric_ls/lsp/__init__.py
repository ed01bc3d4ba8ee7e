"""The language server, split by concern:

- ``handlers``: one function per LSP feature (hover, code actions, inlay hints, lifecycle);
- ``server``: the server's state (open documents, settings sources, what was published);
- ``worker``: the analysis thread, its job queue and caches;
- ``present``: an engine analysis converted for the client (no decisions: the engine's findings are final);
- ``convert``: positions, ranges, diagnostics, edits between engine values and LSP values;
- ``protocol``: pygls' JSON-RPC handling, hardened against broken clients;
- ``serve``: process start-up over stdio or TCP.
"""
