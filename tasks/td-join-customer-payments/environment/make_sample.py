from joingen import make
c, p, _ = make(555, 25, 80, dup_payments=True)
open("/app/data/customers.tsv", "w").write(c)
open("/app/data/payments.csv", "w").write(p)
