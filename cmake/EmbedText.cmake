# Writes the text of INPUT into OUTPUT as a C++ raw string literal, so a file
# the project ships (the built-in variant library) is compiled into a binary.
#   cmake -DINPUT=... -DOUTPUT=... -DNAME=... -P EmbedText.cmake
file(READ "${INPUT}" text)
file(WRITE "${OUTPUT}" "// Generated from ${INPUT}; do not edit.\nstatic const char ${NAME}[] = R\"attn_embed(${text})attn_embed\";\n")
