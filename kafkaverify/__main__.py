from kafkaverify.cli import main

main()
