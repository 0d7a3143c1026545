#!/bin/sh
# Prints how many .txt files the directory given (default .) holds.
dir=${1:-.}
n=0
for f in "$dir"/*.txt; do
  [ -e "$f" ] || continue
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "no files"
else
  echo "$n files"
fi
