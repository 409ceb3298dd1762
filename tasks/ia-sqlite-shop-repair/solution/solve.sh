#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The oracle pipes into the sqlite3 shell what a user would type at its prompt.
set -e
sqlite3 /app/data/shop.db <<'SQL'
.bail on
BEGIN;
UPDATE customers SET email = lower(trim(email, ' ' || char(9) || char(10) || char(13)));
CREATE TEMP TABLE keep AS SELECT email, min(id) AS id FROM customers GROUP BY email;
UPDATE orders SET customer_id = (
    SELECT k.id FROM customers c JOIN keep k ON k.email = c.email WHERE c.id = orders.customer_id);
DELETE FROM customers WHERE id NOT IN (SELECT id FROM keep);
DELETE FROM order_items WHERE order_id NOT IN (SELECT id FROM orders);
UPDATE orders SET total_cents = (
    SELECT coalesce(sum(qty * price_cents), 0) FROM order_items WHERE order_id = orders.id);
CREATE UNIQUE INDEX idx_customers_email ON customers(email);
COMMIT;
SELECT count(*) FROM customers;
SELECT count(*) FROM order_items;
PRAGMA integrity_check;
SQL
