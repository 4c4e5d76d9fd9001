# Run on a lab portal as the cluster user: the session card's info view as the dashboard
# renders it (BatchConnect::Session#render_info_view): the app's info.html.erb, with the
# dashboard's env file loaded and the session's folder as its staged_root. Prints one JSON
# object.
#   ruby ood_session_card.rb APP_DIR SESSION_DIR
require "dotenv"
require "erb"
require "json"
require "pathname"

app_dir, session_dir = ARGV
ENV.update(Dotenv.parse("/etc/ood/config/apps/dashboard/env"))

# The dashboard's binding: the session, of which the view uses its folder.
class Session
  def initialize(folder) = @folder = Pathname.new(folder)
  def staged_root = @folder
  def render(text) = ERB.new(text, trim_mode: "-").result(binding)
end

view = File.join(app_dir, "info.html.erb")
puts({info: File.exist?(view) ? Session.new(session_dir).render(File.read(view)).strip : nil}.to_json)
