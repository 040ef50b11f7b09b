"""`python -m services.graveler`: the graveler process (services/graveler/server.py).

The entry point is the package, not the server module, for the commit workers' sake: they are
spawned processes, and multiprocessing's spawn imports the parent's main module in each of them
before anything else, unless that module is a package's `__main__`. Run as `-m
services.graveler.server`, every worker imported the whole gRPC server for nothing."""

if __name__ == "__main__":
    import sys

    from services.graveler.server import main

    # What --help and a usage error name: not this file's name, __main__.py.
    sys.argv[0] = "python -m services.graveler"
    main()
