import random
rng = random.Random(7)
regions = ["north", "south", "east", "west", "central"]
products = ["widget", "gadget", "gizmo", "doohickey"]
print("region,product,units,unit_price")
for i in range(60):
    print(f"{rng.choice(regions)},{rng.choice(products)},{rng.randint(1, 40)},{rng.randint(50, 9999) / 100:.2f}")
    if i % 17 == 5:
        print()
