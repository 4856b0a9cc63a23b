from orbit_lsp.launch import main

if __name__ == "__main__":
    raise SystemExit(main())
