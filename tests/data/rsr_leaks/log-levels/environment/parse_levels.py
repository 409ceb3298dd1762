def level(line):
    return line.split()[1]
