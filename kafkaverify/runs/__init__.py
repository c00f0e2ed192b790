"""What the model and proof commands do once their options are parsed: build the config, run
the search or the proof, print the bounds, the story and the verdict, write the trace. Each
function returns the command's exit code (kafkaverify/exitcodes.py)."""
