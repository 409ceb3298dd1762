from loggen import make_log
print(make_log(5, ["/", "/login", "/api/v1/items", "/static/app.js"], n=(120, 120), malformed=True)[0], end="")
