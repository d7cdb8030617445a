cat > "$TMPDIR/«kb1».json" <<'EOF'
{"name": "«w1»", "ids": [«n1», «n2»], "note": "don't expand $HOME here"}
EOF
python -m «id1» --input "$TMPDIR/«kb1».json" 2>&1 | tee -a "$LOG" || exit 3

