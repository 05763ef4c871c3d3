"""What the tests run on and with: settings, local servers, engines, browsers, fakes."""
