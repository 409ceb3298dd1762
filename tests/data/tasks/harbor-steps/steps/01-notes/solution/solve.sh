#!/bin/bash
printf 'alpha\nbeta\n' > /app/notes.txt
