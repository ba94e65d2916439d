// Differential oracle for bouncerd/core/url.py: Node's WHATWG URL parser (ada) on JSON lines.
//
// Reads one JSON string per line on stdin and writes one JSON object per line on stdout, in order:
// {"ok":true,"hostname":..,"host":..,"protocol":..,"port":..,"pathname":..,"username":..,...}
// or {"ok":false} when `new URL(input)` throws. All input is read before any output is written, so
// the whole corpus costs one process start.
"use strict";

const chunks = [];
process.stdin.on("data", (chunk) => chunks.push(chunk));
process.stdin.on("end", () => {
  const lines = Buffer.concat(chunks).toString("utf8").split("\n");
  const out = [];
  for (const line of lines) {
    if (line === "") {
      continue;
    }
    const input = JSON.parse(line);
    let url;
    try {
      url = new URL(input);
    } catch {
      out.push('{"ok":false}');
      continue;
    }
    out.push(
      JSON.stringify({
        ok: true,
        hostname: url.hostname,
        host: url.host,
        protocol: url.protocol,
        port: url.port,
        pathname: url.pathname,
        username: url.username,
        password: url.password,
        search: url.search,
        hash: url.hash,
      }),
    );
  }
  out.push("");
  process.stdout.write(out.join("\n"));
});
