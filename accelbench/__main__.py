from accelbench.cli.main import main

# Guarded: multiprocessing's forkserver and spawn re-import the main module in children.
if __name__ == "__main__":
    raise SystemExit(main())
