// A Partner Platform webhook receiver on the JDK's HTTP server (com.sun.net.httpserver) and Jackson.
//
// Run:  WEBHOOK_SECRET=... PORT=8080 java -cp jackson-databind.jar:jackson-core.jar:jackson-annotations.jar Receiver.java
// It verifies X-Service-Signature over the raw body bytes before parsing anything, answers 204 at
// once, and hands each new event (deduplicated by its id) to a worker thread.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Receiver {
    // docs:verify:start
    private static final Pattern SIGNATURE = Pattern.compile("[0-9a-f]{64}");

    /** Returns null when header signs the raw body, else why not. */
    static String verify(byte[] body, String header, String secret) throws GeneralSecurityException {
        // an unset secret would make anyone's signature valid
        if (secret == null || secret.isEmpty()) return "missing-secret";
        if (header == null || header.isEmpty()) return "missing-signature";
        // 64 lowercase hex digits, no "sha256=" prefix
        if (!SIGNATURE.matcher(header).matches()) return "malformed-signature";
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        byte[] expected = mac.doFinal(body);
        // constant time
        if (!MessageDigest.isEqual(expected, HexFormat.of().parseHex(header))) return "signature-mismatch";
        return null;
    }
    // docs:verify:end

    private static final int MAX_BYTES = 1024 * 1024;
    private static final ObjectMapper JSON = new ObjectMapper();
    // Use your database (a unique key on the event id) in production.
    private static final Set<String> SEEN = ConcurrentHashMap.newKeySet();
    private static final ExecutorService WORKER = Executors.newSingleThreadExecutor();

    static void receive(HttpExchange exchange, String secret) throws IOException, GeneralSecurityException {
        if (!exchange.getRequestMethod().equals("POST")) {
            problem(exchange, 405, "Method not allowed", "");
            return;
        }
        // docs:raw-body:start
        byte[] body = exchange.getRequestBody().readNBytes(MAX_BYTES + 1); // the exact bytes received
        if (body.length > MAX_BYTES) {
            problem(exchange, 413, "Payload too large", "");
            return;
        }
        // Every line of the header, joined as HTTP reads them (RFC 9110 §5.3): two signatures are none.
        String signature = String.join(", ", exchange.getRequestHeaders().getOrDefault("X-Service-Signature", List.of()));
        String reason = verify(body, signature, secret);
        // docs:raw-body:end
        if (reason != null) {
            problem(exchange, 401, "Invalid signature", reason);
            return;
        }
        JsonNode event;
        try {
            event = JSON.readTree(body);
        } catch (IOException e) {
            event = null;
        }
        if (event == null || !event.path("id").isTextual()) {
            problem(exchange, 400, "Invalid event", "not a JSON object with an id");
            return;
        }
        if (SEEN.add(event.get("id").asText())) { // a retry of a handled event is acknowledged again, and ignored
            JsonNode handled = event;
            WORKER.execute(() -> System.err.println("received " + handled.path("event").asText() + " " + handled.get("id").asText()));
        }
        exchange.sendResponseHeaders(204, -1);
        exchange.close();
    }

    static void problem(HttpExchange exchange, int status, String title, String detail) throws IOException {
        byte[] out = JSON.writeValueAsBytes(Map.of("type", "about:blank", "title", title, "status", status, "detail", detail));
        exchange.getResponseHeaders().set("Content-Type", "application/problem+json");
        exchange.sendResponseHeaders(status, out.length);
        exchange.getResponseBody().write(out);
        exchange.close();
    }

    /** Used by the package's tests: one line per vector on stdin (id, then base64 secret, body and
     * header, "-" for no header), one line "id<TAB>valid|reason" out. */
    static void checkVectors() throws IOException, GeneralSecurityException {
        Base64.Decoder b64 = Base64.getDecoder();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", -1);
            String header = f[3].equals("-") ? null : new String(b64.decode(f[3]), StandardCharsets.UTF_8);
            String reason = verify(b64.decode(f[2]), header, new String(b64.decode(f[1]), StandardCharsets.UTF_8));
            System.out.println(f[0] + "\t" + (reason == null ? "valid" : reason));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("vectors")) {
            checkVectors();
            return;
        }
        String secret = System.getenv().getOrDefault("WEBHOOK_SECRET", "");
        if (secret.isEmpty()) {
            System.err.println("Receiver: set WEBHOOK_SECRET to the webhook's secret");
            System.exit(1);
        }
        String host = System.getenv().getOrDefault("HOST", "127.0.0.1");
        int port = Integer.parseInt(System.getenv().getOrDefault("PORT", "8080"));
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 0);
        server.createContext("/webhooks/partner-platform", exchange -> {
            try {
                receive(exchange, secret);
            } catch (GeneralSecurityException e) {
                problem(exchange, 500, "Internal error", "");
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.start();
        System.out.println("listening on http://" + host + ":" + port + "/webhooks/partner-platform");
    }
}
