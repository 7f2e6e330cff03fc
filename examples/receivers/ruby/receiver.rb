# A Partner Platform webhook receiver on Sinatra.
#
# Run:  WEBHOOK_SECRET=... PORT=8080 ruby receiver.rb   (or `run Receiver` in a config.ru)
# It verifies X-Service-Signature over the raw body bytes before parsing anything, answers 204 at
# once, and hands each new event (deduplicated by its id) to a worker thread.
require "json"
require "openssl"
require "set"

# docs:verify:start
SIGNATURE = /\A[0-9a-f]{64}\z/

# Returns nil when header signs the raw body, else why not.
def verify(body, header, secret)
  return "missing-secret" if secret.nil? || secret.empty? # an unset secret would make anyone's signature valid
  return "missing-signature" if header.nil? || header.empty?
  return "malformed-signature" unless SIGNATURE.match?(header) # 64 lowercase hex digits, no "sha256=" prefix
  expected = OpenSSL::HMAC.hexdigest("SHA256", secret, body)
  return "signature-mismatch" unless OpenSSL.secure_compare(expected, header) # constant time
  nil
end
# docs:verify:end

# Used by the package's tests: one line per vector on stdin (id, then base64 secret, body and header,
# "-" for no header), one line "id<TAB>valid|reason" out.
def check_vectors
  $stdin.each_line(chomp: true) do |line|
    id, secret, body, header = line.split("\t", -1).map { |f| f == "-" ? nil : f }
    decode = ->(s) { s.unpack1("m0") }
    result = verify(decode.(body), header && decode.(header).force_encoding("UTF-8"), decode.(secret).force_encoding("UTF-8"))
    puts "#{id}\t#{result || 'valid'}"
  end
end

if ARGV == ["vectors"]
  check_vectors
  exit
end

require "sinatra/base"

class Receiver < Sinatra::Base
  MAX_BYTES = 1024 * 1024
  SEEN = Set.new # use your database (a unique key on the event id) in production
  LOCK = Mutex.new
  EVENTS = Queue.new

  Thread.new do
    loop do
      event = EVENTS.pop
      warn "received #{event['event']} #{event['id']}" # your handling here
    end
  end

  configure do
    set :secret, ENV.fetch("WEBHOOK_SECRET", "")
    set :bind, ENV.fetch("HOST", "127.0.0.1")
    set :port, Integer(ENV.fetch("PORT", "8080"))
    set :server, "webrick"
  end

  def problem(status, title, detail = "")
    halt status, { "Content-Type" => "application/problem+json" },
         JSON.generate(type: "about:blank", title: title, status: status, detail: detail)
  end

  post "/webhooks/partner-platform" do
    problem(413, "Payload too large") if request.content_length.to_i > MAX_BYTES
    # docs:raw-body:start
    request.body.rewind
    body = request.body.read # the exact bytes received; not params, not a re-generated JSON
    reason = verify(body, request.env["HTTP_X_SERVICE_SIGNATURE"], settings.secret)
    # docs:raw-body:end
    problem(401, "Invalid signature", reason) if reason
    event = JSON.parse(body) rescue nil
    problem(400, "Invalid event", "not a JSON object with an id") unless event.is_a?(Hash) && event["id"].is_a?(String)
    duplicate = LOCK.synchronize { !SEEN.add?(event["id"]) }
    EVENTS << event unless duplicate # a retry of a handled event is acknowledged again, and ignored
    204
  end
end

if $PROGRAM_NAME == __FILE__
  abort "receiver.rb: set WEBHOOK_SECRET to the webhook's secret" if Receiver.secret.empty?
  Receiver.run!
end
