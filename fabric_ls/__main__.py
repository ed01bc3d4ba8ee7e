from fabric_ls.cli import main

raise SystemExit(main())
