#!/bin/bash
# Terminal-Bench 1.x style: the harness reads pytest's -rA summary from the output.
pytest $TEST_DIR/test_outputs.py -rA -p no:cacheprovider
