from stepscope.cli import main

raise SystemExit(main())
