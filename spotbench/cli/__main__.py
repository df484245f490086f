from spotbench.cli import main

main()
