#!/bin/bash
# organize.sh SRC DEST
#
# Moves every regular file found under the directory SRC (recursively, hidden files included)
# into DEST/EXT/, keeping its file name:
#
#   - EXT is the file name's extension in lower case: the text after the last "." of the name,
#     when the name has a "." that is neither its first nor its last character. Other files
#     (README, .bashrc, archive.) go to DEST/noext/.
#   - If DEST/EXT/NAME already exists (from before, or moved earlier in this run), the file is
#     renamed STEM_1.Ext, STEM_2.Ext, ... (the first free one), where STEM.Ext is NAME (for a
#     file without extension: NAME_1, NAME_2, ...). Nothing is ever overwritten.
#   - Files are processed in byte order of their paths (LC_ALL=C sort).
#   - Directories under SRC are left in place (they end up empty).
#
# At the end it prints one line: "moved N", N being the number of files moved.
# File names can contain any character except a newline.

SRC=$1
DEST=$2
count=0

find $SRC -type f | sort | while read f; do
    name=$(basename $f)
    ext=$(echo ${name##*.} | tr A-Z a-z)
    mkdir -p $DEST/$ext
    mv $f $DEST/$ext/$name
    count=$((count + 1))
done

echo "moved $count"
