<?php
// A Partner Platform webhook receiver in plain PHP.
//
// Run:  WEBHOOK_SECRET=... php -S 127.0.0.1:8080 receiver.php   (or behind PHP-FPM)
// It verifies X-Service-Signature over php://input, the raw body bytes, before decoding anything
// ($_POST is empty for JSON), stores each new event once (deduplicated by its id) for a job to handle,
// and answers 204 at once.
declare(strict_types=1);

// docs:verify:start
/** Returns null when $header signs the raw $body, else why not. */
function verify(string $body, ?string $header, string $secret): ?string
{
    if ($secret === '') { // an unset secret would make anyone's signature valid
        return 'missing-secret';
    }
    if ($header === null || $header === '') {
        return 'missing-signature';
    }
    if (preg_match('/\A[0-9a-f]{64}\z/', $header) !== 1) { // 64 lowercase hex digits, no "sha256=" prefix
        return 'malformed-signature';
    }
    $expected = hash_hmac('sha256', $body, $secret);
    if (!hash_equals($expected, $header)) { // constant time
        return 'signature-mismatch';
    }
    return null;
}
// docs:verify:end

function problem(int $status, string $title, string $detail = ''): void
{
    http_response_code($status);
    header('Content-Type: application/problem+json');
    echo json_encode(['type' => 'about:blank', 'title' => $title, 'status' => $status, 'detail' => $detail]);
}

/** Used by the package's tests: one line per vector on stdin (id, then base64 secret, body and header,
 * "-" for no header), one line "id<TAB>valid|reason" out. */
function check_vectors(): void
{
    while (($line = fgets(STDIN)) !== false) {
        [$id, $secret, $body, $header] = explode("\t", rtrim($line, "\n"));
        $result = verify(base64_decode($body), $header === '-' ? null : base64_decode($header), base64_decode($secret));
        echo $id, "\t", $result ?? 'valid', "\n";
    }
}

function receive(): void
{
    if ($_SERVER['REQUEST_METHOD'] !== 'POST' || parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/webhooks/partner-platform') {
        problem(404, 'Not found');
        return;
    }
    if ((int) ($_SERVER['CONTENT_LENGTH'] ?? 0) > 1024 * 1024) {
        problem(413, 'Payload too large');
        return;
    }
    // docs:raw-body:start
    $body = file_get_contents('php://input'); // the exact bytes received
    $reason = verify($body, $_SERVER['HTTP_X_SERVICE_SIGNATURE'] ?? null, (string) getenv('WEBHOOK_SECRET'));
    // docs:raw-body:end
    if ($reason !== null) {
        problem(401, 'Invalid signature', $reason);
        return;
    }
    $event = json_decode($body, true);
    if (!is_array($event) || !is_string($event['id'] ?? null) || preg_match('/\Aevt_[0-9A-Za-z]{8,64}\z/', $event['id']) !== 1) {
        problem(400, 'Invalid event', 'not a JSON object with an evt_ id');
        return;
    }
    // Each request is a fresh PHP process: dedupe in storage. Creating the file with mode 'x' fails
    // when it exists, so a retry of a stored event is acknowledged again and stored once (use your
    // database's unique key in production). A job handles the stored events.
    $dir = getenv('EVENTS_DIR') ?: sys_get_temp_dir() . '/partner-platform-events';
    if (!is_dir($dir)) {
        @mkdir($dir, 0700, true);
    }
    $path = "$dir/{$event['id']}.json";
    $file = @fopen($path, 'x');
    if ($file === false && !file_exists($path)) {
        problem(500, 'Cannot store the event'); // not acknowledged: the service retries
        return;
    }
    if ($file !== false) {
        fwrite($file, $body);
        fclose($file);
    }
    http_response_code(204);
}

if (PHP_SAPI === 'cli') {
    if (($argv[1] ?? '') === 'vectors') {
        check_vectors();
    } else {
        fwrite(STDERR, "run: WEBHOOK_SECRET=... php -S 127.0.0.1:8080 receiver.php\n");
        exit(2);
    }
} else {
    receive();
}
