from accelbench.cli.main import main

raise SystemExit(main())
