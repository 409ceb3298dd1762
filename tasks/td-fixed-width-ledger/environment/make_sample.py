from ledgen import make
import sys
sys.stdout.write(make(2024, 40)[0])
