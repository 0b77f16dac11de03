from koogcli.cli.app import main

main()
